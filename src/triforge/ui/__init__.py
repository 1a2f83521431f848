"""What people read while and after a run: live progress lines and the trace's summary and HTML view."""
