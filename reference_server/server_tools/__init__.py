"""Server tools: the tools this server runs for the model inside a turn (tool search, web fetch),
the loop that feeds their results back, and their blocks in history."""
