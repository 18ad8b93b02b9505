"""Model: the chat seam (an OpenAI-compatible client), prompts with version ids, the run's trajectory, the model
catalogue (models.dev's: windows, prices, what a model accepts) and prices, the context window (its size, where it
comes from, fitting a conversation into it) and structured output."""
