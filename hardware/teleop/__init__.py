"""Teleoperation devices: keyboard, gamepad, SpaceMouse, scripted expert."""
