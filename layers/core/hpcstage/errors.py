"""Errors with messages meant for the person running hpcstage."""


class HpcstageError(Exception):
    """Base class: the message is one line, fit to show to a user as is."""


class InputError(HpcstageError):
    """The request itself is wrong (bad URL, bad option, malformed execution input)."""


class BucketError(HpcstageError):
    """The bucket cannot be listed (missing, access denied, wrong region)."""


class IncompleteInventoryError(HpcstageError):
    """Some planned key range has no result: a count would be partial, so none is given."""
