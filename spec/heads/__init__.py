"""The block drafters: the shared backbone, DFlash, DSpark (and its Gemma-4 variant), the registry that maps a
checkpoint's architecture name to our class, the file formats they ship in, and new heads for training."""
