"""Model: the chat seam (an OpenAI-compatible client), prompts with version ids, the run's trajectory and prices,
the context window (its size, where it comes from, fitting a conversation into it) and structured output."""
