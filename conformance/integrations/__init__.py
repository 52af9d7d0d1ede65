"""Where Plumbline meets the CI systems its users run: the GitHub Action's steps (`github`)."""
