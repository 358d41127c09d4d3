"""courtly.shell"""
