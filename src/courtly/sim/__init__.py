"""courtly.sim"""
