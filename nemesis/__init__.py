"""ktrial.nemesis"""
