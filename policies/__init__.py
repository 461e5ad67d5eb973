"""Tether."""
