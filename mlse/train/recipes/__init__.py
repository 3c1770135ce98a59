"""Recipes that reshape a student before it trains: vocabulary extension, a linear bridge into the teacher's space,
LoRA adapters."""
