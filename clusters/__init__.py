"""ktrial.clusters"""
