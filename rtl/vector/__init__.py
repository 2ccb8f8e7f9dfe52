"""The tile's vector engine (docs/tile.md)."""
