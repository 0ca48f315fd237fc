"""The language server (pygls): the knowledge base in any editor."""
