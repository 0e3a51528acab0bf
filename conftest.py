"""Repository-level pytest configuration for running the bundled tasks.

The plugin itself is installed through its ``pytest11`` entry point (``pip install -e .``);
nothing here is needed by users of the package.
"""
