"""courtly.core"""
