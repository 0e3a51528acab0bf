"""The wheel's package list; everything else about the build is in pyproject.toml.

pyproject.toml can either list packages by hand or find them, not both: the packages are found
(every package under ``pytest_weirdml/``, so a new subpackage ships without an edit here), and
the bundled tasks' package, ``pytest_weirdml.bundled_tasks``, which pyproject.toml maps onto the
repository's ``tasks/``, is added to them.
"""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["pytest_weirdml", "pytest_weirdml.*"]), "pytest_weirdml.bundled_tasks"])
