"""Model: the chat seam (an OpenAI-compatible client), prompts with version ids, the run's trajectory and prices."""
