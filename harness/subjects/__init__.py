"""Subjects: the implementations under test, behind one protocol (see base.py), in one registry."""

from harness.subjects.base import Declared, ErrorInfo, Recorder, RunResult, Subject, execute

__all__ = ["Declared", "ErrorInfo", "Recorder", "RunResult", "Subject", "execute"]
