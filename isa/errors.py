"""The base of every error the ISA library raises (encoding, decoding, assembly, files).

It has a module of its own so that every other module of ``isa`` can import it without
importing the encoder (``isa.config`` reads configuration files through ``isa.files``, and the
encoder depends on the configuration)."""


class IsaError(ValueError):
    """Base of every encoding/decoding error."""
