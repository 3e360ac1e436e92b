"""Figures and the HTML index built from result files."""
