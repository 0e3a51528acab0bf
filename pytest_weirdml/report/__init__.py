"""What a session reports: the summary data, the terminal tables and the files it writes."""
