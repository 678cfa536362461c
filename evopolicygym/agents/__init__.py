"""Agents: the command provider and the offline reference agent."""
