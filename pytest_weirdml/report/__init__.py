"""What a session reports, built from its records alone: the summary, the results CSVs, the
HTML report with its figures, the transcripts. Free of pytest: ``build.build_reports`` serves the
plugin at the end of a session and the ``weirdml report`` command alike."""
