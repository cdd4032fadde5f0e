"""Choices of the networking app and IBTA encodings used in partitions.conf.

MTU and rate codes are the InfiniBand Architecture Specification encodings (vol. 1, PathRecord MTU and Rate;
OpenSM `include/iba/ib_types.h` `IB_MTU_LEN_*` and `IB_PATH_RECORD_RATE_*`). `man opensm` requires them in
partitions.conf ("mtu=4 for 2048"; rate default 3 = 10 Gb/s).
"""
from django.db import models


class Direction(models.TextChoices):
    INGRESS = "ingress", "Ingress"
    EGRESS = "egress", "Egress"


class Ethertype(models.TextChoices):
    IPV4 = "IPv4", "IPv4"
    IPV6 = "IPv6", "IPv6"


class PublicIpKind(models.TextChoices):
    FLOATING = "floating", "Floating (NAT to a port)"
    ROUTER_GATEWAY = "router_gateway", "The VPC router's external address (SNAT)"


class Membership(models.TextChoices):
    FULL = "full", "Full"
    LIMITED = "limited", "Limited"


class VirtualGuidStatus(models.TextChoices):
    ALLOCATED = "allocated", "Allocated"
    RELEASING = "releasing", "Released, waiting until the SM removed it from its partitions"


IB_MTU_CODES = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
IB_RATE_CODES = {10: 3, 30: 4, 5: 5, 20: 6, 40: 7, 60: 8, 80: 9, 120: 10, 14: 11, 56: 12, 112: 13, 168: 14,
                 25: 15, 100: 16, 200: 17, 300: 18, 28: 19, 50: 20, 400: 21, 600: 22}
