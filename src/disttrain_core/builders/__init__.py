"""Pure builders of the objects a job owns."""
