"""What people and machines read: tables, report, audit files, localize, the gate verb."""
