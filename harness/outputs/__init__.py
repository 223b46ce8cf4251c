"""What people and machines read: tables, report, audit files, the gate verb."""
