"""Small widgets shared by several parts of the window."""
