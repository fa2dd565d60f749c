"""The Models window and the catalogue of models the user can pick."""
