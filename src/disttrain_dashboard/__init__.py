"""`disttrain dashboard`: a read-only web view of every job, served by the CLI or the operator's image."""
