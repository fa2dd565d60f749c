"""The main window: tabs, menus, the status bar."""
