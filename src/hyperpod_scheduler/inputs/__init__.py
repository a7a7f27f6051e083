"""What comes in from outside, checked at the door: bounded YAML/JSON readers, the API's name pattern, and
text made safe for a terminal."""
