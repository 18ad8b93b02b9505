"""Edit: the model's operations matched against files, checked by guardrails on a scratch copy, and written with a
journal that can put every byte back (reading the model's answer into operations is answers/)."""
