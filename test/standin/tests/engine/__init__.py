"""Engine-engineer tests (package marker so unittest discovery recurses)."""
