"""Helpers for a door's state adapter: the checks every door's ``load_state_dict`` needs.

A door's state wraps the engine's (:meth:`Engine.state_dict`); these are the
shared pieces for reading the door's own fields, so every door names a bad
field the same way and never validates a state by itself.
"""

from dataset_kit.engine._checkpoint import index_field, json_text, parse_json, same, short

__all__ = ["index_field", "json_text", "parse_json", "same", "short"]
