"""The base of every error the ISA library raises (encoding, decoding, assembly, files), and
the error of a user file (:class:`InputFileError`, raised by :mod:`isa.files`, :mod:`isa.safe_io`
and :mod:`isa.safe_archive`).

It has a module of its own so that every other module of ``isa`` can import it without
importing the encoder (``isa.config`` reads configuration files through ``isa.files``, and the
encoder depends on the configuration)."""


class IsaError(ValueError):
    """Base of every encoding/decoding error."""


class InputFileError(IsaError):
    """A user-supplied file is missing, unreadable or of the wrong kind."""
