"""The bottom layer: the few mechanisms every other layer shares, importing nothing of ctxstore
but its errors: how packages export names (lazily, and from the paths of an earlier release),
the plan vocabulary with its two drivers, and the one place litellm is imported."""
