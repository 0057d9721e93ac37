"""Readers: measurement record formats in, canonical records out."""

from .canonical import ImportReport, Record
from .detect import read_records

__all__ = ["ImportReport", "Record", "read_records"]
