@echo off
rem gsbd-logs.cmd - double-click or run: gsb-wsl.ps1 logs -Follow (see gsb-wsl.ps1 for options)
powershell.exe -NoProfile -ExecutionPolicy Bypass -File "%~dp0gsb-wsl.ps1" logs -Follow %*
set rc=%ERRORLEVEL%
rem keep the window open when started by a double-click from Explorer
echo %CMDCMDLINE% | find /i "/c" >nul && pause
exit /b %rc%
