@echo off
rem gsb-wsl.cmd - run gsb-wsl.ps1 (beside this file) without changing PowerShell's
rem execution policy. Commands: install, uninstall, start, stop, restart, status, logs
rem Example: gsb-wsl install -Distro Ubuntu-24.04 -Port 19876
powershell.exe -NoProfile -ExecutionPolicy Bypass -File "%~dp0gsb-wsl.ps1" %*
exit /b %ERRORLEVEL%
