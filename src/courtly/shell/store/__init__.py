"""courtly.shell.store"""
