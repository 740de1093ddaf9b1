"""Bundled data with sources: published model configs and GPU capacities."""
