"""pytest plugin (entry point `pytest11`): placeholder until the generated-scenario issue lands."""
