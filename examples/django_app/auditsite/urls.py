from audit import views
from django.urls import path

urlpatterns = [
    path("files/<path:file_path>/log", views.file_log),
]
