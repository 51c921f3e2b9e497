@echo off
rem gsbd-start.cmd - double-click or run: gsb-wsl.ps1 start (see gsb-wsl.ps1 for options)
powershell.exe -NoProfile -ExecutionPolicy Bypass -File "%~dp0gsb-wsl.ps1" start %*
set rc=%ERRORLEVEL%
rem keep the window open when started by a double-click from Explorer
echo %CMDCMDLINE% | find /i "/c" >nul && pause
exit /b %rc%
