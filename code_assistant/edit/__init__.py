"""Edit: the model's plan parsed into operations, matched against files, checked by guardrails on a scratch copy, and
written with a journal that can put every byte back."""
