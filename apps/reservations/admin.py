from django.contrib import admin

from .models import OnDemandReserve, QueuePriority

admin.site.register(OnDemandReserve)
admin.site.register(QueuePriority)
