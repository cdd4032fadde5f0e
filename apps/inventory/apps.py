from django.apps import AppConfig


class InventoryConfig(AppConfig):
    name = "apps.inventory"
    label = "inventory"

    def ready(self) -> None:
        from apps.tenancy.quotas import register_quota_qualifiers

        from .catalog import gpu_model_list

        def mig_profiles() -> set[str]:
            return {p.name for m in gpu_model_list() if m.mig for p in m.mig.profiles}

        register_quota_qualifiers("gpus", lambda: {m.key for m in gpu_model_list()})
        register_quota_qualifiers("mig_slices", mig_profiles)
        register_quota_qualifiers("vgpus", lambda: {t.name for m in gpu_model_list() for t in m.vgpu_types})
