"""The live panel: what speculation and the prompt cache are doing, as cards and charts."""
