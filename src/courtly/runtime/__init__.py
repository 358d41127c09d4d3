"""courtly.runtime"""
